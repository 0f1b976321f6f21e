//! Signals during a command: SIGINT, SIGTERM, SIGHUP and SIGPIPE, and the temporary
//! files no signal may leave behind.
//!
//! A probing run ([`catch_run`]) stops at the first signal: probing stops, the run writes
//! every record it finished, commits its output, and exits 128 + the signal (129 SIGHUP,
//! 130 SIGINT, 141 SIGPIPE, 143 SIGTERM). A second SIGINT, SIGTERM or SIGHUP while that
//! happens exits at once with its code. A SIGPIPE never does: it is the run's own write
//! to a pipe nobody reads any more (its stderr, say), so the run still writes its file.
//! A server or a benchmark ([`catch`]) stops the same way but leaves SIGPIPE ignored: a
//! client that hangs up is no reason to stop serving the others. A command that cannot
//! stop half-way ([`exit_on_signal`]: `vtnt convert`) exits at the first signal.
//!
//! Whichever way the process exits on a signal, every file being written under a
//! temporary name ([`temporary`]) is removed first, and no rename ([`settle`]) happens
//! after that.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use anyhow::Context;
use signal_hook::consts::{SIGHUP, SIGINT, SIGPIPE, SIGTERM};
use signal_hook::flag;
use signal_hook::iterator::Signals;
use vtnt_job::say;

/// Set by the first signal.
static STOP: AtomicBool = AtomicBool::new(false);
/// The first signal, as the watcher saw it (0: none yet).
static FIRST: AtomicUsize = AtomicUsize::new(0);
/// The latest signal, set in the handler itself (the watcher may not have run yet).
static LAST: AtomicUsize = AtomicUsize::new(0);
/// Files being written under a temporary name.
static TEMPORARIES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Whether (and how) the handlers are installed: once per process.
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();

/// Catches SIGINT, SIGTERM, SIGHUP and SIGPIPE from now on, for a probing run that stops
/// at the first and keeps what it measured; returns the flag they set.
pub fn catch_run() -> anyhow::Result<&'static AtomicBool> {
    install(&[SIGHUP, SIGINT, SIGPIPE, SIGTERM], true)
}

/// [`catch_run`] for a server or a benchmark: SIGPIPE stays ignored.
pub fn catch() -> anyhow::Result<&'static AtomicBool> {
    install(&[SIGHUP, SIGINT, SIGTERM], true)
}

/// For a command that cannot stop half-way: from now on SIGINT, SIGTERM, SIGHUP and
/// SIGPIPE remove the temporary files and exit at once with 128 + the signal.
pub fn exit_on_signal() -> anyhow::Result<()> {
    install(&[SIGHUP, SIGINT, SIGPIPE, SIGTERM], false).map(|_| ())
}

/// Installs the handlers of `signals` and the thread that watches them, once; the first
/// call decides (a process runs one kind of command). `stop_first`: the first signal only
/// sets the flag.
fn install(signals: &[i32], stop_first: bool) -> anyhow::Result<&'static AtomicBool> {
    let installed = INSTALLED.get_or_init(|| {
        let mut watched = Signals::new(signals).map_err(|e| format!("catching signals: {e}"))?;
        for &sig in signals {
            // The latest signal first, so the flag never says stop before it says which.
            flag::register_usize(sig, &LAST, sig as usize)
                .and_then(|_| flag::register(sig, &STOP))
                .map_err(|e| format!("catching signal {sig}: {e}"))?;
        }
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || watch(&mut watched, stop_first))
            .map(|_| ())
            .map_err(|e| format!("starting the signal watcher: {e}"))
    });
    installed
        .clone()
        .map_err(anyhow::Error::msg)
        .context("installing signal handlers")?;
    Ok(&STOP)
}

/// The watcher: remembers the first signal and exits when the command cannot (or, at a
/// second signal from outside, should not) wait any longer.
fn watch(signals: &mut Signals, stop_first: bool) {
    let mut from_outside = 0;
    for sig in signals.forever() {
        let _ = FIRST.compare_exchange(0, sig as usize, Ordering::SeqCst, Ordering::SeqCst);
        if sig != SIGPIPE {
            from_outside += 1;
        }
        if !stop_first || from_outside >= 2 {
            exit_now(128 + sig);
        }
    }
}

/// Removes every file being written under a temporary name and exits with `code`.
fn exit_now(code: i32) -> ! {
    let temporaries = temporaries();
    for t in temporaries.iter() {
        let _ = std::fs::remove_file(t);
    }
    // (still holding the list: no rename can follow)
    std::process::exit(code);
}

/// Writes a command's output to stdout (the `out!` and `put!` macros): a reader that
/// went away (`vtnt lab truth | head`) ends the process at once, quietly, with 141 as
/// SIGPIPE ends `cat`, instead of the panic of `println!`; any other failure to write
/// is said and exits 1.
pub fn stdout(args: std::fmt::Arguments) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            exit_now(128 + SIGPIPE);
        }
        say!("vtnt: error: writing to stdout: {e}");
        exit_now(1);
    }
}

/// Whether `e` (or what it wraps) is a write into a pipe whose reader is gone.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn temporaries() -> MutexGuard<'static, Vec<PathBuf>> {
    TEMPORARIES.lock().unwrap_or_else(|e| e.into_inner())
}

/// `path` is a file being written under a temporary name: an exit on a signal removes it.
pub fn temporary(path: &Path) {
    temporaries().push(path.to_path_buf());
}

/// `path` ([`temporary`]) is done with: runs `f` (its rename into place, or its removal)
/// where no exit on a signal can come between, then forgets it.
pub fn settle<T>(path: &Path, f: impl FnOnce() -> T) -> T {
    let mut list = temporaries();
    let out = f();
    list.retain(|p| p != path);
    out
}

/// The signal that stopped the command (the first one), with its name.
fn caught() -> Option<(&'static str, i32)> {
    let sig = match FIRST.load(Ordering::SeqCst) {
        0 => LAST.load(Ordering::SeqCst),
        s => s,
    };
    let sig = i32::try_from(sig).ok()?;
    let name = match sig {
        SIGHUP => "SIGHUP",
        SIGINT => "SIGINT",
        SIGPIPE => "SIGPIPE",
        SIGTERM => "SIGTERM",
        _ => return None,
    };
    Some((name, sig))
}

/// The exit code a caught signal calls for (128 + the signal), if one was caught.
pub fn exit_code() -> Option<ExitCode> {
    caught().map(|(_, sig)| ExitCode::from(128 + sig as u8))
}

/// Whether a signal has arrived since [`catch`] or [`catch_run`].
pub fn stopped() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// After a run that stopped on a signal: says so on stderr, with the records written and
/// where, and returns the exit code the signal calls for.
pub fn report(records: u64, path: Option<&Path>) -> ExitCode {
    let to = path.map_or_else(|| "stdout".to_string(), |p| p.display().to_string());
    let Some((name, sig)) = caught() else {
        say!("vtnt: interrupted: {records} records written to {to}");
        return ExitCode::FAILURE;
    };
    say!("vtnt: interrupted by {name}: {records} records written to {to}");
    ExitCode::from(128 + sig as u8)
}
