//! The configuration file and the log events, through the binary: a flag beats the key's
//! environment variable, which beats the file, which beats the built-in default (seen
//! in `vtnt config show` and in what a daemon answers to `get pps` and `get window`);
//! unknown keys, bad values and untrusted files refused with the file, line and key; a
//! `--config` that is not there; the sample the package ships; `vtnt daemon
//! --log-format json`'s events for a client (info) and its command (debug).

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

mod daemon_common;

use daemon_common::{Daemon, Scratch, VTNT};

/// `vtnt ARGS` with the environment cleared of the configuration's variables but `env`.
fn vtnt(args: &[&str], env: &[(&str, &str)]) -> Output {
    command(env).args(args).output().expect("running vtnt")
}

fn command(env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(VTNT);
    for (k, _) in std::env::vars() {
        if k.starts_with("VTNT_") && k != "VTNT_REQUIRE_ALL" {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().copied());
    cmd
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes `text` to `dir/name`, mode 0644.
fn file(dir: &Scratch, name: &str, text: &str) -> PathBuf {
    let p = dir.path(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    p
}

/// The error line of a run that must fail (exit 1, nothing on stdout).
fn refused(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = vtnt(args, env);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?}");
    err.trim_end().to_string()
}

#[test]
fn show_says_what_wins_environment_over_file_over_default() {
    let dir = Scratch::new("cfgshow");
    let f = file(
        &dir,
        "c.toml",
        "[probe]\npps = 50\nwindow = 10\nexclude = [\"/f\"]\n\n[agent]\nruntimes = [\"native\", \"spt\"]\n",
    );
    let fp = f.to_str().unwrap();
    let out = vtnt(
        &["--config", fp, "config", "show"],
        &[("VTNT_PROBE_PPS", "70"), ("VTNT_PROBE_EXCLUDE", "/e1, /e2")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    for line in [
        format!("# configuration file: {fp} (read); precedence: flag, environment, file, default"),
        "pps = 70  # VTNT_PROBE_PPS".into(),
        format!("window = 10  # {fp}:3:10"),
        "allow-public = false  # default".into(),
        format!("runtimes = [\"native\", \"spt\"]  # {fp}:7:12"),
        // exclusion lists add up: the variable's and the file's
        format!("exclude = [\"/e1\", \"/e2\", \"/f\"]  # VTNT_PROBE_EXCLUDE and {fp}:4:11"),
        "max-clients = 64  # default".into(),
        "# url is not set".into(),
    ] {
        assert!(shown.lines().any(|l| l == line), "no `{line}` in:\n{shown}");
    }
    // VTNT_CONFIG names the file when --config does not; --config wins over it
    let out = vtnt(&["config", "show"], &[("VTNT_CONFIG", fp)]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("pps = 50  # "));
    let out = vtnt(
        &["--config", fp, "config", "show"],
        &[("VTNT_CONFIG", "/nonexistent/vtnt.toml")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn unknown_keys_and_bad_values_are_refused_with_file_line_and_key() {
    let dir = Scratch::new("cfgbad");
    let trace =
        |f: &Path| ["--config", f.to_str().unwrap(), "trace", "127.0.0.1"].map(String::from);
    let run = |f: &Path, env: &[(&str, &str)]| {
        let a = trace(f);
        refused(&a.iter().map(String::as_str).collect::<Vec<_>>(), env)
    };
    let f = file(&dir, "unknown.toml", "[probe]\npps = 5\nppps = 5\n");
    assert_eq!(
        run(&f, &[]),
        format!(
            "vtnt: error: {}:3:1: unknown key `ppps` in [probe] (its keys: pps, window, \
             allow-public, exclude)",
            f.display()
        )
    );
    let f = file(
        &dir,
        "section.toml",
        "[daemon]\npps = 5\n[agents]\nnode = \"a\"\n",
    );
    assert!(
        run(&f, &[]).starts_with(&format!(
            "vtnt: error: {}:3:2: unknown section [agents]",
            f.display()
        )),
        "{}",
        run(&f, &[])
    );
    let f = file(
        &dir,
        "value.toml",
        "[log]\nformat = \"json\"\n[daemon]\nwindow = 0\n",
    );
    assert_eq!(
        run(&f, &[]),
        format!(
            "vtnt: error: {}:4:10: daemon.window = \"0\": 0 is not in 1..=32768",
            f.display()
        )
    );
    let f = file(&dir, "enum.toml", "[log]\nformat = \"xml\"\n");
    assert_eq!(
        run(&f, &[]),
        format!(
            "vtnt: error: {}:2:10: log.format = \"xml\": not one of text, json",
            f.display()
        )
    );
    let f = file(&dir, "type.toml", "[agent]\nruntimes = \"spt\"\n");
    assert_eq!(
        run(&f, &[]),
        format!(
            "vtnt: error: {}:2:12: agent.runtimes: a list ([\"...\", ...]), not a string",
            f.display()
        )
    );
    // a variable's bad value names the variable
    let f = file(&dir, "empty.toml", "");
    assert_eq!(
        run(&f, &[("VTNT_PROBE_WINDOW", "many")]),
        "vtnt: error: VTNT_PROBE_WINDOW: probe.window = \"many\": invalid digit found in string"
    );
    // a file named and not there
    for (args, env) in [
        (
            vec!["--config", "/nonexistent/c.toml", "config", "show"],
            vec![],
        ),
        (
            vec!["config", "show"],
            vec![("VTNT_CONFIG", "/nonexistent/c.toml")],
        ),
    ] {
        let e = refused(&args, &env);
        let how = if env.is_empty() {
            "--config"
        } else {
            "VTNT_CONFIG"
        };
        assert_eq!(
            e,
            format!(
                "vtnt: error: configuration file /nonexistent/c.toml ({how}): No such file or \
                 directory (os error 2)"
            )
        );
    }
    // a file others may write
    let f = file(&dir, "open.toml", "[probe]\npps = 5\n");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert!(
        run(&f, &[]).ends_with("is refused: others may write it (mode 0666); `chmod go-w` it"),
        "{}",
        run(&f, &[])
    );
}

/// A file of another user is refused whole; a user's own file is read, but it may not
/// turn on public probing (root's may).
#[test]
fn only_root_files_turn_on_public_probing_and_others_files_are_refused() {
    vtnt_testkit::require_root!();
    let dir = Scratch::new("cfgown");
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let public = file(
        &dir,
        "public.toml",
        "[probe]\nwindow = 9\nallow-public = true\n",
    );
    let plain = file(&dir, "plain.toml", "[probe]\nwindow = 9\n");
    let nobody = 65534;
    for f in [&public, &plain] {
        std::os::unix::fs::chown(f, Some(nobody), None).unwrap();
    }
    let as_nobody = |f: &Path| {
        use std::os::unix::process::CommandExt;
        command(&[])
            .args(["--config", f.to_str().unwrap(), "config", "show"])
            .uid(nobody)
            .gid(nobody)
            .output()
            .unwrap()
    };
    // root reading nobody's file
    let e = refused(
        &["--config", plain.to_str().unwrap(), "config", "show"],
        &[],
    );
    assert!(
        e.ends_with("is refused: it belongs to uid 65534, neither root nor this user (uid 0)"),
        "{e}"
    );
    // nobody reading its own
    let out = as_nobody(&plain);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\nwindow = 9  # "));
    let out = as_nobody(&public);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim_end(),
        format!(
            "vtnt: error: {}:3:16: probe.allow-public = true: only a file owned by root may turn \
             on public probing (this one is uid 65534's); pass --allow-public to the run",
            public.display()
        )
    );
    // root's own
    std::os::unix::fs::chown(&public, Some(0), None).unwrap();
    let out = vtnt(
        &["--config", public.to_str().unwrap(), "config", "show"],
        &[],
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\nallow-public = true  # "));
}

#[test]
fn the_packages_sample_is_what_vtnt_prints_and_changes_nothing() {
    let out = vtnt(&["config", "sample"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = String::from_utf8_lossy(&out.stdout);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/config.toml");
    let shipped = std::fs::read_to_string(path).unwrap();
    assert!(
        printed == shipped,
        "packaging/config.toml is stale: `vtnt config sample > packaging/config.toml`"
    );
    // every key commented out: read, it sets nothing
    let dir = Scratch::new("cfgsample");
    let f = file(&dir, "sample.toml", &shipped);
    let out = vtnt(&["--config", f.to_str().unwrap(), "config", "show"], &[]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!shown.contains(&format!("{}:", f.display())), "{shown}");
    // and with every key uncommented, it is a valid file that sets each
    let all: String = shipped
        .lines()
        .map(|l| match l.strip_prefix('#') {
            Some(kv) if kv.contains(" = ") && !kv.starts_with(' ') => kv,
            _ => l,
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let f = file(&dir, "all.toml", &all);
    let out = vtnt(&["--config", f.to_str().unwrap(), "config", "show"], &[]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !shown.contains("# default") && !shown.contains("is not set"),
        "{shown}"
    );
}

/// A daemon of this configuration and these flags, on a unix socket in `dir`.
fn daemon(dir: &Scratch, config: &Path, flags: &[&str], env: &[(&str, &str)]) -> (Daemon, PathBuf) {
    let sock = dir.path(&format!("d{}.sock", flags.len() + env.len()));
    let mut cmd = command(env);
    cmd.args(["--config", config.to_str().unwrap(), "daemon", "-U"])
        .arg(&sock)
        .args(flags);
    let s = sock.clone();
    (Daemon::spawn(cmd, move || s.exists()), sock)
}

/// What the daemon on `sock` says to `lines` before it closes the connection.
fn talk(sock: &Path, lines: &str) -> String {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(lines.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn a_flag_beats_the_environment_beats_the_file_beats_the_default() {
    vtnt_testkit::require_root!();
    let dir = Scratch::new("cfgprec");
    let none = file(&dir, "none.toml", "");
    let f = file(&dir, "d.toml", "[daemon]\npps = 300\nwindow = 50\n");
    let env = [("VTNT_DAEMON_PPS", "400")];
    for (config, flags, env, pps, window) in [
        (&none, &[][..], &[][..], 20, 1000),
        (&f, &[], &[], 300, 50),
        (&f, &[], &env[..], 400, 50),
        (&f, &["-p", "500"], &env[..], 500, 50),
        (&f, &["--window", "60"], &[], 300, 60),
    ] {
        let (d, sock) = daemon(&dir, config, flags, env);
        let said = talk(&sock, "get pps\nget window\nexit\n");
        let want = format!("OK pps {pps}\nOK window 0/{window}\n");
        assert!(said.starts_with(&want), "{flags:?} {env:?}: {said}");
        d.stop();
    }
}

#[test]
fn the_daemon_logs_clients_and_commands_as_json_lines() {
    vtnt_testkit::require_root!();
    let dir = Scratch::new("cfglog");
    let none = file(&dir, "none.toml", "");
    let json = ["--log-format", "json", "--log-level", "debug"];
    let (d, sock) = daemon(&dir, &none, &json, &[]);
    let said = talk(&sock, "attach format json\nping -c 1 127.0.0.1\ndone\n");
    assert!(said.contains("\"type\":\"ping\""), "{said}");
    let out = d.stop();
    assert!(out.status.success());
    let events: Vec<Value> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let one = |m: &str| -> &Value {
        let all: Vec<&Value> = events.iter().filter(|e| e["message"] == m).collect();
        assert_eq!(all.len(), 1, "{m}: {events:?}");
        all[0]
    };
    let client = format!("{}:0", sock.display());
    assert_eq!(one("listening")["socket"], sock.to_str().unwrap());
    let connected = one("client connected");
    assert_eq!(connected["level"], "INFO");
    assert_eq!(connected["client"], client.as_str());
    assert!(connected["timestamp"].is_string());
    let accepted = one("command accepted");
    assert_eq!(accepted["level"], "DEBUG");
    assert_eq!(accepted["client"], client.as_str());
    assert_eq!(accepted["id"], 1);
    assert_eq!(accepted["command"], "ping -c 1 127.0.0.1");
    assert_eq!(one("command finished")["id"], 1);
    assert_eq!(
        one("client finished: its session is over")["client"],
        client.as_str()
    );
}
