//! Warts that scamper's own tools read, on lab traces through every tunnel class: `vtnt
//! trace -O warts` in the lab, then Debian's `sc_warts2json` must print exactly what our
//! reader and JSON writer print for the same file (`vtnt convert`), and `sc_wartsdump` and
//! `sc_analysis_dump` must read every record without complaint. `vtnt tnt -O warts` writes
//! every measurement as a scamper record, its annotations in lists of their own.

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
        // ours names the build that measured, in the cycle start (docs/scamper.md,
        // "Which build wrote a file"); scamper's tool does not print it
        let version = run(Command::new(lab_common::VTNT).arg("--version"));
        let version = String::from_utf8_lossy(&version.stdout);
        let key = format!(
            ", \"vtnt\":\"{}\"",
            version.trim().trim_start_matches("vtnt ")
        );
        let ours = String::from_utf8_lossy(&ours.stdout);
        assert_eq!(ours.matches(&key).count(), 1, "{method}: {ours}");
        assert_eq!(
            ours.replacen(&key, "", 1),
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

    let _ = std::fs::remove_dir_all(&dir);
}

/// `N` of `label N` in the run summary, e.g. `N probes`, `(N in pings`.
fn summary_count(stderr: &str, before: &str, after: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.contains(" targets: tunnels "))
        .unwrap_or_else(|| panic!("no summary in: {stderr}"));
    let rest = line.split_once(before).map_or(line, |(_, r)| r);
    let (n, _) = rest
        .split_once(after)
        .unwrap_or_else(|| panic!("no `{before}N{after}` in {line}"));
    let n = n.rsplit(|c: char| !c.is_ascii_digit()).next().unwrap_or(n);
    n.parse()
        .unwrap_or_else(|_| panic!("`{before}N{after}` in {line}"))
}

/// The records of a tnt output by role (from our reader, which reads the annotations).
fn roles(file: &std::path::Path) -> std::collections::BTreeMap<String, usize> {
    let bytes = std::fs::read(file).unwrap();
    let items: Vec<vtnt_formats::Item> = if bytes.starts_with(&[0x12, 0x05]) {
        vtnt_formats::read_warts(&bytes)
            .into_iter()
            .map(Result::unwrap)
            .collect()
    } else {
        vtnt_formats::JsonReader::new(&bytes[..])
            .map(Result::unwrap)
            .collect()
    };
    let mut by = std::collections::BTreeMap::new();
    for i in items {
        let vtnt_formats::Item::Annotated(_, f) = i else {
            assert!(i.record().is_none(), "a record without its role: {i:?}");
            continue;
        };
        let role = vtnt_formats::record_role(f.record.as_deref().unwrap()).unwrap();
        let name = serde_json::to_value(role).unwrap()["role"]
            .as_str()
            .unwrap()
            .to_string();
        *by.entry(name).or_insert(0) += 1;
    }
    by
}

/// `vtnt tnt -O warts` writes every measurement as a scamper record: Debian's tools read
/// them all, and the probes in them add up to the run's own count, kind by kind. The
/// annotations ride in lists: `vtnt convert` turns the file into the JSON `-O json` would
/// print (roles, annotations) and back byte for byte, and `vtnt tnt --from` the file
/// (warts or JSON) gives the same annotations again without a probe. Warts goes to
/// stdout too.
#[test]
fn lab_tnt_warts_holds_every_measurement_and_reads_back() {
    vtnt_testkit::require_root!("sc_warts2json", "sc_wartsdump");
    let lab = lab_common::Lab::up("wtnt", None);
    let dsts = lab.destinations();
    let dir = std::env::temp_dir().join(format!("vtnt-warts-tnt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |n: &str| dir.join(n).to_str().unwrap().to_string();
    let tnt = |extra: &[&str], targets: bool| {
        let mut args = vec![lab_common::VTNT, "tnt", "--pps", "500", "--seed", "3"];
        args.extend(extra);
        if targets {
            args.extend(dsts.iter().map(String::as_str));
        }
        let o = lab.exec(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o
    };
    let warts = path("tnt.warts");
    let o = tnt(&["-O", "warts", "-o", &warts], true);
    let err = String::from_utf8_lossy(&o.stderr).to_string();

    // Every record in scamper's tools, and every probe the run counted in them.
    let json = run(Command::new("sc_warts2json").arg(&warts));
    let json = String::from_utf8_lossy(&json.stdout).to_string();
    let objs: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let sum = |ty: &str, key: &str| -> u64 {
        objs.iter()
            .filter(|o| o["type"] == ty)
            .map(|o| o[key].as_u64().unwrap())
            .sum()
    };
    let by_role = roles(std::path::Path::new(&warts));
    println!("records by role: {by_role:?}; {err}");
    assert_eq!(by_role.get("initial"), Some(&dsts.len()), "{by_role:?}");
    assert!(by_role.get("ping").is_some_and(|&n| n > 0), "{by_role:?}");
    assert!(by_role.get("reveal").is_some_and(|&n| n > 0), "{by_role:?}");
    let traces = objs.iter().filter(|o| o["type"] == "trace").count();
    let pings = objs.iter().filter(|o| o["type"] == "ping").count();
    assert_eq!(traces, by_role["initial"] + by_role["reveal"]);
    assert_eq!(pings, by_role["ping"]);
    assert_eq!(
        sum("trace", "probe_count") + sum("ping", "ping_sent"),
        summary_count(&err, "; ", " probes ("),
        "sc_warts2json's records hold every probe the run counted"
    );
    assert_eq!(
        sum("ping", "ping_sent"),
        summary_count(&err, "traces, ", " in pings")
    );
    let dump = run(Command::new("sc_wartsdump").arg(&warts));
    let dump = String::from_utf8_lossy(&dump.stdout);
    assert_eq!(
        dump.matches("traceroute from").count(),
        traces,
        "sc_wartsdump traces"
    );
    assert_eq!(
        dump.matches("ping from").count(),
        pings,
        "sc_wartsdump pings"
    );

    // JSON -> warts -> JSON keeps every annotation byte for byte.
    let (j1, w2, j2) = (path("a.json"), path("b.warts"), path("c.json"));
    for (from, to) in [(&warts, &j1), (&j1, &w2), (&w2, &j2)] {
        run(Command::new(lab_common::VTNT).args(["convert", from, to]));
    }
    let j1_text = std::fs::read_to_string(&j1).unwrap();
    assert_eq!(j1_text, std::fs::read_to_string(&j2).unwrap());
    assert!(j1_text.contains(", \"tnt\":{\"role\":\"reveal\""));

    // -O warts to stdout, -O json to stdout: the same records, annotations kept.
    let stdout = tnt(&["-O", "warts"], true).stdout;
    std::fs::write(path("stdout.warts"), &stdout).unwrap();
    assert_eq!(roles(&dir.join("stdout.warts")), by_role);
    let stdout = tnt(&["-O", "json"], true).stdout;
    std::fs::write(path("stdout.json"), &stdout).unwrap();
    assert_eq!(roles(&dir.join("stdout.json")), by_role);

    // --from the file: the same annotations, not one probe.
    let initial = |text: &str| -> Vec<serde_json::Value> {
        let mut v: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|o| o["tnt"]["role"] == "initial")
            .map(|mut o| {
                // who ran a shared revelation first depends on the order targets finish
                let t = &mut o["tnt"];
                t.as_object_mut().unwrap().remove("probes");
                for tun in t["tunnels"].as_array_mut().unwrap() {
                    if let Some(r) = tun["revelation"].as_object_mut() {
                        r.remove("cached");
                    }
                }
                for u in t["unrevealed"].as_array_mut().unwrap() {
                    u.as_object_mut().unwrap().remove("cached");
                }
                serde_json::json!({"dst": o["dst"], "hops": o["hops"], "tnt": o["tnt"]})
            })
            .collect();
        v.sort_by_key(|o| o["dst"].to_string());
        v
    };
    let want = initial(&j1_text);
    assert_eq!(want.len(), dsts.len());
    for from in [&warts, &j1] {
        let o = tnt(&["-O", "json", "--from", from], false);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(summary_count(&err, "; ", " probes ("), 0, "{from}: {err}");
        let again = String::from_utf8_lossy(&o.stdout);
        assert_eq!(initial(&again), want, "--from {from}");
        assert_eq!(
            roles_of_text(&again),
            by_role,
            "--from {from}: every record again"
        );
    }

    // A malformed role: that record is skipped, named by its line, and measured again;
    // the run ends with 2, as for any bad record of --from.
    let line = j1_text
        .lines()
        .position(|l| l.contains(", \"tnt\":{\"role\":\"ping\""))
        .unwrap()
        + 1;
    let bad = j1_text.replacen("{\"role\":\"ping\"", "{\"role\":\"pong\"", 1);
    std::fs::write(path("bad.json"), bad).unwrap();
    let bad_path = path("bad.json");
    let o = lab.exec(&[
        lab_common::VTNT,
        "tnt",
        "--pps",
        "500",
        "-O",
        "json",
        "--from",
        &bad_path,
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "skipping object {line} (ending at line {line}): tnt role: unknown variant `pong`"
        )),
        "{err}"
    );
    assert_eq!(
        summary_count(&err, "; ", " probes ("),
        1,
        "the one ping again: {err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn roles_of_text(text: &str) -> std::collections::BTreeMap<String, usize> {
    let mut by = std::collections::BTreeMap::new();
    for l in text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        if let Some(r) = v["tnt"]["role"].as_str() {
            *by.entry(r.to_string()).or_insert(0) += 1;
        }
    }
    by
}
