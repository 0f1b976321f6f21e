//! `vtnt convert` on files Debian's scamper wrote: warts to JSON equals what
//! sc_warts2json prints; corrupt or empty input fails with a position or a reason and
//! leaves no output file; a signal ends a conversion without leaving its temporary file.

use std::process::Command;

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("vtnt-convert-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn scamper_warts_converts_to_what_sc_warts2json_prints() {
    // scamper probes 127.0.0.1 with raw sockets
    vtnt_testkit::require_root!("scamper", "sc_warts2json");
    let warts = tmp("loop.warts");
    let st = Command::new("scamper")
        .args(["-c", "trace -P icmp-paris -q 1 -w 1", "-O", "warts", "-o"])
        .arg(&warts)
        .args(["-i", "127.0.0.1"])
        .status()
        .unwrap();
    assert!(st.success(), "scamper could not trace 127.0.0.1: {st}");
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

/// A multi-record warts file of the formats crate's fuzz corpus.
fn samples_warts() -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../formats/fuzz/corpus/warts_read/ours-samples.warts");
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Offsets where the records of a sound warts file start (and the file's length).
fn record_starts(b: &[u8]) -> Vec<usize> {
    let mut v = vec![0];
    let mut at = 0;
    while at + 8 <= b.len() {
        at += 8 + u32::from_be_bytes([b[at + 4], b[at + 5], b[at + 6], b[at + 7]]) as usize;
        v.push(at);
    }
    v
}

fn convert(input: &std::path::Path, output: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vtnt"))
        .arg("convert")
        .arg(input)
        .arg(output)
        .output()
        .unwrap()
}

#[test]
fn truncated_warts_keeps_the_complete_records_in_the_output_file() {
    let b = samples_warts();
    let starts = record_starts(&b);
    assert!(starts.len() > 6, "the sample has many records");
    // Cut the second-to-last record in half: every record before it is complete.
    let (from, to) = (starts[starts.len() - 3], starts[starts.len() - 2]);
    let cut = (from + to) / 2;
    let whole = tmp("whole.warts");
    std::fs::write(&whole, &b[..from]).unwrap();
    let o = convert(&whole, "-");
    assert!(o.status.success());
    let expected = o.stdout;
    let lines = expected.iter().filter(|&&c| c == b'\n').count();
    assert!(lines >= 5);

    let cut_file = tmp("cut.warts");
    std::fs::write(&cut_file, &b[..cut]).unwrap();
    let json = tmp("cut.json");
    let o = convert(&cut_file, json.to_str().unwrap());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("byte {cut}")) && err.contains("truncated"),
        "{err}"
    );
    assert!(err.contains(&format!("after {lines} objects")), "{err}");
    assert_eq!(std::fs::read(&json).unwrap(), expected, "{err}");
    // stdout: the same objects, the same exit code
    let o = convert(&cut_file, "-");
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(o.stdout, expected);
    // warts out: the records written read back as the same JSON
    let warts = tmp("cut-out.warts");
    let o = convert(&cut_file, warts.to_str().unwrap());
    assert_eq!(o.status.code(), Some(2));
    let o = convert(&warts, "-");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.stdout, expected);
}

#[test]
fn a_bad_json_line_is_skipped_and_the_lines_after_it_kept() {
    let o = convert(
        &{
            let p = tmp("samples.warts");
            std::fs::write(&p, samples_warts()).unwrap();
            p
        },
        "-",
    );
    assert!(o.status.success());
    let good = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = good.lines().collect();
    let mut damaged: Vec<&str> = lines.clone();
    let bad = &lines[2][..lines[2].len() / 2];
    damaged[2] = bad; // a record cut in the middle, line 3
    let input = tmp("damaged.json");
    std::fs::write(&input, damaged.join("\n") + "\n").unwrap();
    let out = tmp("damaged-out.json");
    let o = convert(&input, out.to_str().unwrap());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("JSON line 3"), "{err}");
    let mut kept = lines.clone();
    kept.remove(2);
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        kept.join("\n") + "\n"
    );
}

/// The "echo id" sc_wartsdump prints for the first trace of a warts file.
fn echo_id(warts: &std::path::Path) -> u16 {
    let o = Command::new("sc_wartsdump")
        .arg(warts)
        .output()
        .expect("sc_wartsdump (scripts/setup.sh installs scamper)");
    let dump = String::from_utf8_lossy(&o.stdout);
    let at = dump.find("echo id: ").unwrap_or_else(|| panic!("{dump}")) + 9;
    let digits: String = dump[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap_or_else(|_| panic!("{dump}"))
}

#[test]
fn icmp_paris_trace_keeps_its_echo_id_in_warts_and_through_convert() {
    // vtnt probes 127.0.0.1 with raw sockets; sc_wartsdump reads the echo id
    vtnt_testkit::require_root!("sc_wartsdump");
    let warts = tmp("icmp-id.warts");
    let o = Command::new(env!("CARGO_BIN_EXE_vtnt"))
        .args([
            "trace",
            "-P",
            "icmp-paris",
            "-q",
            "1",
            "-w",
            "1",
            "-O",
            "warts",
            "-o",
        ])
        .arg(&warts)
        .arg("127.0.0.1")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "vtnt could not trace 127.0.0.1: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let id = echo_id(&warts);
    assert!(
        id >= 0x8000,
        "the engine's echo idents are in the upper half: {id}"
    );
    let again = tmp("icmp-id-again.warts");
    let o = convert(&warts, again.to_str().unwrap());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(echo_id(&again), id);
}

#[test]
fn empty_input_is_an_error_and_makes_no_file() {
    let out = tmp("from-empty.warts");
    for (name, body) in [("empty.json", ""), ("blank.json", "\n\n")] {
        let input = tmp(name);
        std::fs::write(&input, body).unwrap();
        let o = convert(&input, out.to_str().unwrap());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains("nothing to convert"), "{name}: {err}");
        assert!(!out.exists(), "{name}: an output file appeared");
    }
    // from stdin too
    let o = Command::new(env!("CARGO_BIN_EXE_vtnt"))
        .args(["convert", "-", out.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(!out.exists());
}

#[test]
fn a_signal_ends_a_conversion_without_a_temporary_file() {
    use std::io::Write;
    use std::process::Stdio;
    let dir = tmp("signals");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let samples = samples_warts();
    for (sig, code) in [("INT", 130), ("TERM", 143), ("HUP", 129)] {
        let out = dir.join(format!("out-{sig}.json"));
        // input on a pipe that stays open: the conversion waits for more
        let mut child = Command::new(env!("CARGO_BIN_EXE_vtnt"))
            .args(["convert", "-"])
            .arg(&out)
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&samples).unwrap();
        stdin.flush().unwrap();
        // the temporary file appears, then the signal
        let t0 = std::time::Instant::now();
        let temporaries = || -> Vec<String> {
            std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".tmp-"))
                .collect()
        };
        while temporaries().is_empty() {
            assert!(t0.elapsed().as_secs() < 10, "{sig}: no temporary file");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        let k = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(k.success());
        let o = child.wait_with_output().unwrap();
        drop(stdin);
        assert_eq!(o.status.code(), Some(code), "{sig}: {:?}", o.status);
        assert_eq!(temporaries(), Vec::<String>::new(), "{sig}");
        assert!(!out.exists(), "{sig}: an unfinished output appeared");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
