//! Warts that scamper's own tools read, on lab traces through every tunnel class: `vtnt
//! trace -O warts` in the lab, then Debian's `sc_warts2json` must print exactly what our
//! reader and JSON writer print for the same file (`vtnt convert`), and `sc_wartsdump` and
//! `sc_analysis_dump` must read every record without complaint. `vtnt tnt -O warts` keeps
//! its annotations in a JSON sidecar and its warts stays readable.

mod lab_common;

use std::process::Command;

fn run(cmd: &mut Command) -> std::process::Output {
    let o = cmd.env("TZ", "UTC").output().expect("spawn");
    assert!(
        o.status.success(),
        "{:?}: {}",
        cmd,
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.stderr.is_empty()
            || !String::from_utf8_lossy(&o.stderr)
                .to_lowercase()
                .contains("error")
    );
    o
}

#[test]
fn lab_warts_reads_in_scamper_tools_exactly_like_our_json() {
    vtnt_testkit::require_root!(
        "scamper",
        "sc_warts2json",
        "sc_wartsdump",
        "sc_analysis_dump"
    );
    let lab = lab_common::Lab::up("warts", None);
    let dsts = lab.destinations();
    let dir = std::env::temp_dir().join(format!("vtnt-warts-lab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for method in ["icmp-paris", "udp-paris", "tcp"] {
        let warts = dir.join(format!("{method}.warts"));
        let mut args = vec![
            lab_common::VTNT,
            "trace",
            "-P",
            method,
            "-q",
            "1",
            "-w",
            "1",
            "--pps",
            "500",
            "-O",
            "warts",
            "-o",
        ];
        let w = warts.to_str().unwrap().to_string();
        args.push(&w);
        args.extend(dsts.iter().map(String::as_str));
        let o = lab.exec(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

        let theirs = run(Command::new("sc_warts2json").arg(&warts));
        let ours = run(Command::new(lab_common::VTNT)
            .args(["convert"])
            .arg(&warts)
            .arg("-"));
        assert_eq!(
            String::from_utf8_lossy(&ours.stdout),
            String::from_utf8_lossy(&theirs.stdout),
            "{method}: sc_warts2json and our reader+writer disagree"
        );
        let text = String::from_utf8_lossy(&theirs.stdout);
        assert_eq!(
            text.lines()
                .filter(|l| l.contains("\"type\":\"trace\""))
                .count(),
            dsts.len()
        );
        if method == "icmp-paris" {
            assert!(
                text.contains("\"mpls_labels\""),
                "explicit tunnels carry labels"
            );
        }
        let dump = run(Command::new("sc_wartsdump").arg(&warts));
        assert!(
            String::from_utf8_lossy(&dump.stdout)
                .matches("traceroute")
                .count()
                >= dsts.len()
        );
        let ad = run(Command::new("sc_analysis_dump").arg(&warts));
        assert_eq!(
            String::from_utf8_lossy(&ad.stdout)
                .lines()
                .filter(|l| l.starts_with('T'))
                .count(),
            dsts.len()
        );
    }

    // TNT: warts stays scamper's, annotations go to the sidecar
    let warts = dir.join("tnt.warts");
    let w = warts.to_str().unwrap().to_string();
    let mut args = vec![
        lab_common::VTNT,
        "tnt",
        "--pps",
        "500",
        "-O",
        "warts",
        "-o",
        &w,
    ];
    args.extend(dsts.iter().map(String::as_str));
    let o = lab.exec(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let theirs = run(Command::new("sc_warts2json").arg(&warts));
    assert_eq!(
        String::from_utf8_lossy(&theirs.stdout)
            .lines()
            .filter(|l| l.contains("\"type\":\"trace\""))
            .count(),
        dsts.len()
    );
    let side = std::fs::read_to_string(format!("{w}.tnt.json")).expect("sidecar");
    assert_eq!(side.lines().count(), dsts.len());
    assert!(side.contains("invisible-uhp") && side.contains("explicit"));
    let _ = std::fs::remove_dir_all(&dir);
}
