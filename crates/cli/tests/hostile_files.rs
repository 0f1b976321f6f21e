//! `vtnt convert` against hostile files: every prefix of a small scamper warts file, and
//! seeded bit flips, truncations, appended garbage, NUL bytes, a 10 MB line, empty files
//! and a directory, for warts and JSON inputs (from a file and from stdin), to JSON and
//! warts, on stdout and into a file. Every run must end within a timeout with either
//! exit 0 and a complete result, or a message on stderr and a non-zero exit; never a
//! panic, and never a half-written output: whatever output exists holds only complete
//! objects, as many as the command says it wrote and every complete object of the input
//! (the library's readers tell which). Damaged input never exits 0, nor does an input
//! with nothing in it (exit 1, no output file).
//!
//! The cases are drawn from a fixed seed; `VTNT_HOSTILE_SEED=n` draws others, and every
//! failure names the seed that reproduces it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use vtnt_formats::{read_warts, JsonReader};
use vtnt_testkit::Rng;

const DEFAULT_SEED: u64 = 0x7e57_f11e_5eed;
const TIMEOUT: Duration = Duration::from_secs(20);

fn corpus(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../formats/fuzz/corpus")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// One hostile input: a name for messages and its bytes (`None`: a directory).
struct Case {
    name: String,
    bytes: Option<Vec<u8>>,
}

fn case(name: impl Into<String>, bytes: Vec<u8>) -> Case {
    Case {
        name: name.into(),
        bytes: Some(bytes),
    }
}

/// Damaged versions of one sound file.
fn mutations(rng: &mut Rng, base: &str, b: &[u8], cases: &mut Vec<Case>) {
    for i in 0..8 {
        let mut c = b.to_vec();
        let flips = 1 + rng.below(8);
        let mut at = Vec::new();
        for _ in 0..flips {
            let (byte, bit) = (rng.below(c.len()), rng.below(8));
            c[byte] ^= 1 << bit;
            at.push(byte);
        }
        cases.push(case(format!("{base}: bit flips #{i} at bytes {at:?}"), c));
    }
    for _ in 0..6 {
        let n = rng.below(b.len());
        cases.push(case(
            format!("{base}: truncated to {n} bytes"),
            b[..n].to_vec(),
        ));
    }
    let mut c = b.to_vec();
    let n = 1 + rng.below(300);
    c.extend(rng.bytes(n));
    cases.push(case(format!("{base}: random bytes appended"), c));
    let mut c = b.to_vec();
    c.extend(vec![0u8; 1 + rng.below(300)]);
    cases.push(case(format!("{base}: NUL bytes appended"), c));
    let mut c = b.to_vec();
    let at = rng.below(b.len());
    c.splice(at..at, vec![0u8; 1 + rng.below(16)]);
    cases.push(case(format!("{base}: NUL bytes inserted at {at}"), c));
}

fn cases(rng: &mut Rng) -> Vec<Case> {
    let mut v = Vec::new();
    for base in [
        "warts_read/ours-samples.warts",
        "warts_read/scamper-netns-icmp-paris.warts",
        "json_read/ours-samples.json",
        "json_read/scamper-netns.json",
    ] {
        mutations(rng, base, &corpus(base), &mut v);
    }
    let json = corpus("json_read/ours-samples.json");
    let warts = corpus("warts_read/ours-samples.warts");
    let mut long = json.clone();
    let cut = json.iter().position(|&c| c == b'\n').map_or(0, |i| i + 1);
    let mut line = vec![b'x'; 10 << 20];
    line.push(b'\n');
    long.splice(cut..cut, line);
    v.push(case("JSON with a 10 MB line after the first", long));
    let mut c = vec![b'{'; 10 << 20];
    c.push(b'\n');
    v.push(case("a 10 MB line of {", c));
    let mut c = warts.clone();
    c.extend(vec![b'x'; 10 << 20]);
    v.push(case("warts followed by a 10 MB line", c));
    let mut c = warts[..8].to_vec();
    c[4..8].copy_from_slice(&(64u32 << 20).to_be_bytes());
    c.push(0);
    v.push(case("a warts record announcing 64 MiB, holding 1 byte", c));
    let mut c = warts.clone();
    c.extend([0x12, 0x05, 0x00, 0x06, 0xff, 0xff, 0xff, 0xff]);
    v.push(case("warts, then a record announcing 4 GiB", c));
    v.push(case("an empty file", Vec::new()));
    v.push(case("warts magic alone", vec![0x12, 0x05]));
    v.push(case("a warts header with no body", warts[..8].to_vec()));
    v.push(case("a lone newline", b"\n".to_vec()));
    v.push(case("NUL bytes only", vec![0; 64]));
    v.push(Case {
        name: "a directory".into(),
        bytes: None,
    });
    v
}

/// Where a run's input comes from, where its output goes and in what format.
#[derive(Clone, Copy, Debug)]
enum Out {
    StdoutJson,
    StdoutWarts,
    FileJson,
    FileWarts,
    /// Input on stdin (`-`), JSON on stdout.
    StdinToStdoutJson,
}

const OUTS: [Out; 5] = [
    Out::StdoutJson,
    Out::StdoutWarts,
    Out::FileJson,
    Out::FileWarts,
    Out::StdinToStdoutJson,
];

struct Run {
    code: i32,
    stdout: Vec<u8>,
    stderr: String,
}

/// Runs `vtnt ARGS` with stdin from `stdin` (else nothing), stdout and stderr in files
/// (no pipe to drain), killing it at the timeout.
fn vtnt(dir: &Path, args: &[&std::ffi::OsStr], stdin: Option<&Path>, what: &str) -> Run {
    let (so, se) = (dir.join("stdout"), dir.join("stderr"));
    let input = match stdin {
        Some(p) => File::open(p).map_or_else(|_| Stdio::null(), Stdio::from),
        None => Stdio::null(),
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_vtnt"))
        .args(args)
        .stdin(input)
        .stdout(File::create(&so).unwrap())
        .stderr(File::create(&se).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Run {
        code: status.code().unwrap_or(-1),
        stdout: std::fs::read(&so).unwrap(),
        stderr: std::fs::read_to_string(&se).unwrap(),
    }
}

/// How many objects an output holds; fails unless every one of them is complete.
fn complete_objects(bytes: &[u8], warts: bool, what: &str) -> usize {
    if warts {
        let items = read_warts(bytes);
        for (i, it) in items.iter().enumerate() {
            assert!(it.is_ok(), "{what}: output object {i} is broken: {it:?}");
        }
        items.len()
    } else {
        assert!(
            bytes.is_empty() || bytes.ends_with(b"\n"),
            "{what}: the output's last line is cut"
        );
        let items: Vec<_> = JsonReader::new(bytes).collect();
        for (i, it) in items.iter().enumerate() {
            assert!(
                it.is_ok(),
                "{what}: output line {} is broken: {it:?}",
                i + 1
            );
        }
        items.len()
    }
}

/// The `N` of the command's "wrote N objects".
fn wrote(stderr: &str) -> Option<usize> {
    let at = stderr.find("vtnt: wrote ")? + "vtnt: wrote ".len();
    stderr[at..].split(' ').next()?.parse().ok()
}

/// What the library's readers find in an input: how many complete objects a
/// conversion must keep, and whether the input is sound (nothing to report).
#[derive(Clone, Copy)]
struct Expect {
    keep: usize,
    sound: bool,
}

fn readable(input: &Path) -> Expect {
    let Ok(b) = std::fs::read(input) else {
        return Expect {
            keep: 0,
            sound: false,
        };
    };
    let oks: Vec<bool> = if b.starts_with(&[0x12, 0x05]) {
        read_warts(&b).iter().map(Result::is_ok).collect()
    } else {
        JsonReader::new(&b[..]).map(|i| i.is_ok()).collect()
    };
    Expect {
        keep: oks.iter().filter(|&&ok| ok).count(),
        sound: oks.iter().all(|&ok| ok),
    }
}

/// Converts `input` (called `name`) as `out` says and checks how the run ended.
fn check(dir: &Path, input: &Path, name: &str, expect: Expect, out: Out, seed: u64) {
    let what = format!("seed {seed}: {name} -> {out:?}");
    let Expect { keep, sound } = expect;
    let (target, warts) = match out {
        Out::StdoutJson | Out::StdinToStdoutJson => (None, false),
        Out::StdoutWarts => (None, true),
        Out::FileJson => (Some(dir.join("out.json")), false),
        Out::FileWarts => (Some(dir.join("out.warts")), true),
    };
    if let Some(t) = &target {
        let _ = std::fs::remove_file(t);
    }
    let dash = std::ffi::OsStr::new("-");
    let stdin = matches!(out, Out::StdinToStdoutJson);
    let mut args = vec![
        std::ffi::OsStr::new("convert"),
        if stdin { dash } else { input.as_os_str() },
        target.as_deref().map_or(dash, Path::as_os_str),
    ];
    if target.is_none() {
        args.extend(["-O", if warts { "warts" } else { "json" }].map(std::ffi::OsStr::new));
    }
    let r = vtnt(dir, &args, stdin.then_some(input), &what);
    let what = format!("{what} (exit {}, stderr: {})", r.code, r.stderr.trim_end());
    assert!(
        r.code != 101 && !r.stderr.contains("panicked"),
        "{what}: panic"
    );
    assert!(r.code >= 0, "{what}: killed by a signal");
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "{what}: temporary files left: {leftovers:?}"
    );
    let output = match &target {
        None => Some(r.stdout.clone()),
        Some(t) => std::fs::read(t).ok(),
    };
    // Damage is reported, soundness is not (warts may refuse what JSON holds).
    assert!(
        r.code != 0 || sound,
        "{what}: damaged input converted without complaint"
    );
    // An input with nothing in it is an error, as convert documents.
    let nothing = sound && keep == 0;
    assert!(
        r.code == 0 || !sound || warts || nothing,
        "{what}: sound input refused"
    );
    if nothing {
        assert_eq!(r.code, 1, "{what}: an input with nothing in it converted");
        assert!(
            target.as_ref().is_none_or(|t| !t.exists()),
            "{what}: an output file for nothing"
        );
    }
    if r.code == 0 {
        assert!(
            !r.stderr.contains("skipped") && !r.stderr.contains("damaged"),
            "{what}: exit 0 with a problem reported"
        );
    } else {
        assert!(
            r.stderr.lines().any(|l| l.starts_with("vtnt: ")),
            "{what}: failed without a message"
        );
    }
    match (r.code, output) {
        (_, None) if keep > 0 => panic!("{what}: {keep} complete objects lost, no output"),
        (0, None) => panic!("{what}: exit 0 and no output file"),
        (_, Some(bytes)) => {
            let n = complete_objects(&bytes, warts, &what);
            // warts adds the cycle start a lone cycle stop refers to.
            let kept = if warts { n >= keep } else { n == keep };
            assert!(kept, "{what}: {keep} complete objects in, {n} out");
            if let Some(w) = wrote(&r.stderr) {
                assert_eq!(n, w, "{what}: the output holds {n} objects, not {w}");
            } else {
                assert_ne!(r.code, 0, "{what}: exit 0 without a count");
                assert_eq!(n, 0, "{what}: objects written but not counted");
            }
        }
        (_, None) => assert!(wrote(&r.stderr).is_none(), "{what}: wrote but no file"),
    }
}

#[test]
fn hostile_files_end_cleanly() {
    let seed = vtnt_testkit::seed("VTNT_HOSTILE_SEED", || DEFAULT_SEED);
    let mut rng = Rng::new(seed);
    let dir = std::env::temp_dir().join(format!("vtnt-hostile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let started = Instant::now();
    let mut runs = 0;
    // Every prefix of a small scamper file, into a file (JSON and warts in turn).
    let small = corpus("warts_read/scamper-netns-icmp-paris.warts");
    let input = dir.join("input");
    for n in 0..small.len() {
        std::fs::write(&input, &small[..n]).unwrap();
        let name = format!("scamper-netns-icmp-paris.warts cut to {n} bytes");
        let out = if n % 2 == 0 {
            Out::FileJson
        } else {
            Out::FileWarts
        };
        check(&dir, &input, &name, readable(&input), out, seed);
        runs += 1;
    }
    let cases = cases(&mut rng);
    for c in &cases {
        let input: PathBuf = match &c.bytes {
            Some(b) => {
                let p = dir.join("input");
                std::fs::write(&p, b).unwrap();
                p
            }
            None => {
                let p = dir.join("input-dir");
                std::fs::create_dir_all(&p).unwrap();
                p
            }
        };
        let expect = readable(&input);
        for out in OUTS {
            check(&dir, &input, &c.name, expect, out, seed);
            runs += 1;
        }
    }
    // The output itself a directory: refused, the directory left alone.
    let input = dir.join("input");
    std::fs::write(&input, corpus("warts_read/ours-samples.warts")).unwrap();
    let out_dir = dir.join("out-dir.json");
    std::fs::create_dir_all(&out_dir).unwrap();
    let args = ["convert".as_ref(), input.as_os_str(), out_dir.as_os_str()];
    let r = vtnt(&dir, &args, None, "output is a directory");
    assert_eq!(r.code, 1, "output is a directory: {}", r.stderr);
    assert!(r.stderr.contains("out-dir.json"), "{}", r.stderr);
    assert!(out_dir.is_dir());
    eprintln!(
        "hostile files: {} cases, {runs} runs in {:.1} s",
        cases.len() + small.len(),
        started.elapsed().as_secs_f64()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
